"""The catalogue records of the ops, quant formats and engine variants (moving into their rooms)."""

"""The harness protocol: an engine in any language judged over stdin/stdout (docs/protocol.md).
``framing`` (bytes), ``harness`` (the process and its module-like view), ``signatures`` (the
judged API as a table, from the code)."""

"""An implementation with no function at all: every test that judges it is NOT COVERED."""

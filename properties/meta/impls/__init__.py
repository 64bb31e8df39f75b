"""Implementations that implement nothing, for the meta test that nothing passes unjudged."""

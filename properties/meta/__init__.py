"""Meta-tests: the judge judged (its own plumbing, reports and mutation zoo)."""

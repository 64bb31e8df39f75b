"""logitcheck's judge: hypothesis strategies and pytest properties driven by one catalogue."""

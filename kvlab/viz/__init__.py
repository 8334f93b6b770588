"""Plot builders (pure functions) and thin widget wiring shared by all chapters."""

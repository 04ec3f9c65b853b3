"""Values in a reader's words and the document tree, for the command line and the back office."""

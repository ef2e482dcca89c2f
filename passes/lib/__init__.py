"""What passes share: the registry and pass manager, the rewriting library, attention and collective folds."""

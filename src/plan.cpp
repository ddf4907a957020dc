// placeholder: filled in by the change that owns this file

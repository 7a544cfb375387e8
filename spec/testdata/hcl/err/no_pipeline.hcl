# A file with no pipeline block.
// pipec:ignore schema nothing here

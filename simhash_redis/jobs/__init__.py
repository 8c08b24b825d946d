"""The jobs floor: readers of every input format, the bulk loader, dedupe, dump and stats."""

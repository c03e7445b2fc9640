"""The Server page: the local API over the window's own engine worker."""

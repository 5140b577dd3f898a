"""What `make run` starts: a generic process supervisor and the product's list of services."""

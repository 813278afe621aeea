# Models for catalog.

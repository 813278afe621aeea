# Models for allocations.

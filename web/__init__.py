"""Plumbing every app's views share (no models, no app imports: `catalog` may use it too)."""

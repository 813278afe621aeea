# Models for advisor.

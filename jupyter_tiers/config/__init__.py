"""Profiles (tiers.yaml), what a project file may set, and the registry of every job and service."""

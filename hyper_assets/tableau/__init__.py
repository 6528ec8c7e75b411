"""Tableau publishing: action batches and applying them to `.hyper` files."""

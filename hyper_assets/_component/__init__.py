"""The YAML component: `HyperExtractComponent` (`component.py`) and its parts, the specs of
its YAML, its tables, the adoption of existing assets and its publish."""

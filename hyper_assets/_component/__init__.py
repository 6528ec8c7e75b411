"""The parts of `hyper_assets.component` (internal: import from `hyper_assets.component`)."""

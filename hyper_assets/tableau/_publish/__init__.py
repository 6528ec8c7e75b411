"""The publish: plan, payload, data model, action batches sent and committed."""

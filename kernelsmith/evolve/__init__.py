"""The evolutionary search: run store, archive, prompts, reply edits and the async engine."""

"""Foundations shared by every other package: messages, tokens, config, events."""

"""The OpenHands reference worker, run as ``python -I <this directory>`` under an OpenHands virtualenv.

- ``oh_sdk_steps``: openhands-sdk's summarizing condenser stepped through a recording.
- ``oh_legacy_steps``: openhands-ai 0.62's observation masking and amortized forgetting condensers.
"""

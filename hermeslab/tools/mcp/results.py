"""What the model reads of an MCP tool result: text, with non-text content described.

Chat models take tool results as text, so images, audio and binary resources
are reduced to one descriptive line each instead of being dropped silently.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types


def result_text(result: types.CallToolResult) -> str:
    """What the model reads from a tool result: its text, with other content described in one line each.

    Structured content stands in as JSON when the result has no text.
    """
    parts = [_block_text(block) for block in result.content]
    text = "\n".join(part for part in parts if part)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
    return text


def _block_text(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, (types.ImageContent, types.AudioContent)):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4:,} bytes]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return resource.text
        return f"[resource {resource.uri} ({resource.mime_type or 'binary'})]"
    if isinstance(block, types.ResourceLink):
        return f"[resource link {block.uri}" + (f": {block.description}]" if block.description else "]")
    return f"[{getattr(block, 'type', type(block).__name__)} content]"

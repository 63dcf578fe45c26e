"""OpenAI-compatible chat client with retries, stop sequences and usage/cost accounting.

    from agent.llm import LLMClient, LLMSettings
    llm = LLMClient(LLMSettings(base_url="http://localhost:8000/v1", model="qwen2.5-7b"))
    llm.complete([{"role": "user", "content": "hi"}]).text
"""

from __future__ import annotations

from .client import PAPER_STOP, BoundedClient, LLMClient, LLMSettings, cut_at_stop
from .gate import CallRefused, Gate, GatedChatModel, PlannedCall
from .pricing import Price, PriceTable
from .types import ChatModel, Completion, LLMError, Message, MessagesLike

__all__ = [
    "PAPER_STOP", "BoundedClient", "CallRefused", "ChatModel", "Completion", "Gate", "GatedChatModel", "LLMClient",
    "LLMError", "LLMSettings", "Message", "MessagesLike", "PlannedCall", "Price", "PriceTable", "cut_at_stop",
]

"""The stages of the governed call chain, one small module each.

Every stage has the signature ``async (Call) -> Envelope | None``: it reads and
fills the Call, and returns an Envelope to end the call early. The order is
fixed in ``callgate.runtime.pipeline``.
"""

"""Bots: pure policies (``bots.policies``) that choose among legal actions from a seat's view."""

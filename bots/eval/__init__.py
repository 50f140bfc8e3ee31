"""Evaluation tools for the bot policies that need more than the in-process duel (``openspiel_gin``:
our policies against OpenSpiel's simple Gin Rummy bot, inside OpenSpiel's engine)."""

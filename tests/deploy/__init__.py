"""Checks of the deployment files in deploy/ against the code."""

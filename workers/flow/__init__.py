"""Debounce and batch windows on the worker: the window workflow and its one activity."""

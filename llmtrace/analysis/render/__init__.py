"""Renderers: present a built ``Report`` or ``Comparison``; they never compute statistics."""

"""The rules, one per module, grouped in one package per family (PC0 tool, PC1 placement...).

The registry imports every module here; a rule is any `Rule` subclass with a `code`.
"""

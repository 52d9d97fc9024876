"""Reusable CST surgery for the rules' fixes: what an edit is (edits), how to write the target's
device (edits, placement), call arguments and statements (calls), AMP (amp) and the CUDA API
table's replacements (api). Rules build edits with these; the fixer applies them."""

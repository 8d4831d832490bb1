"""sandboxing"""

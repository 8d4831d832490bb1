"""measuring"""

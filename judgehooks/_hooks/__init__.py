"""_hooks"""

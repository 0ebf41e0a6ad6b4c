"""_grading"""

"""_evaluators"""

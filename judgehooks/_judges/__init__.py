"""_judges"""

"""_alerts"""

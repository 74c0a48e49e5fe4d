"""Differentially private linear models."""

from ._glm import DPHuberRegressor, DPLinearRegression, DPLogisticRegression

__all__ = ["DPHuberRegressor", "DPLinearRegression", "DPLogisticRegression"]

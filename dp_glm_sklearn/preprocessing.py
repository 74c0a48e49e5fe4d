"""Preprocessing with public parameters only: nothing is learned from the data.

A scaler fitted on the private data (``StandardScaler``, ``MinMaxScaler``)
publishes what it learned, unnoised, and makes every scaled row depend on
every record.  :class:`PublicRangeScaler` maps each feature's documented
range (from a data dictionary, a codebook, the domain) onto [-1, 1], row by
row, so a Pipeline of it and a DP estimator is private as a whole.
"""

from numbers import Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_array, validate_data

__all__ = ["PublicRangeScaler"]

#: The input both methods take: CSR or dense, floats, NaN passed through.
_INPUT = dict(accept_sparse="csr", ensure_all_finite="allow-nan", dtype=(np.float64, np.float32))


class PublicRangeScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Scale each feature from a public range ``[low, high]`` onto ``[-1, 1]``.

    ``(x - (low + high) / 2) / ((high - low) / 2)``, then clipped to
    ``[-1, 1]`` (``clip=True``).  Every parameter is public (a documented
    range), each row is transformed alone, and ``fit`` keeps only the width
    of X (and its column names; it checks that the values are numbers):
    the scaler learns nothing from the data, publishes nothing, and the
    searches and :func:`~dp_glm_sklearn.leaky_steps` do not flag it (its
    scikit-learn tag ``requires_fit`` is False; not for a subclass, whose
    ``fit`` may learn).  ``transform`` works before ``fit``;
    ``get_feature_names_out`` and pandas or polars output need a fit (they
    read the width and names from it).

    Centred ranges matter to the DP estimators: features all of one sign
    (ranges mapped to [0, 1]) share an offset that the intercept must cancel,
    a badly conditioned direction that the default number of noisy gradient
    steps does not finish (a user trial's logistic coefficients came out
    about 45% too small at every epsilon; centred, they matched
    scikit-learn's).  After this scaler a row of d features has norm at most
    ``sqrt(d)``: ``feature_norm=sqrt(d)`` clips nothing, and a bound nearer
    the rows' typical norm often does better (the noise grows with it).

    Parameters
    ----------
    low : float or array-like of shape (n_features,), default=-1.0
        Public lower end of each feature's range (one float: every feature).
    high : float or array-like of shape (n_features,), default=1.0
        Public upper end, above ``low``.
    clip : bool, default=True
        Clip the scaled values to ``[-1, 1]``: a value outside its documented
        range is treated as at its end, so that every row keeps the norm
        bound ``sqrt(d)``.  ``False`` leaves them (the estimator's own
        ``feature_norm`` clipping still bounds each row).

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen in ``fit`` (the width of X: public).
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen in ``fit``, when X has string column names.

    Notes
    -----
    Missing values (NaN) pass through as NaN, as in scikit-learn's scalers;
    the DP estimators refuse them. Sparse X is accepted when every range is
    symmetric around 0 (``low == -high``), so that scaling keeps it sparse.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from dp_glm_sklearn import DPLogisticRegression
    >>> from dp_glm_sklearn.preprocessing import PublicRangeScaler
    >>> ages_and_hours = np.array([[18.0, 0.0], [54.0, 40.0], [90.0, 80.0]])
    >>> scaler = PublicRangeScaler(low=[18, 0], high=[90, 80])  # a codebook's ranges
    >>> scaler.fit_transform(ages_and_hours)
    array([[-1., -1.],
           [ 0.,  0.],
           [ 1.,  1.]])
    >>> model = make_pipeline(PublicRangeScaler(low=[18, 0], high=[90, 80]),
    ...                       DPLogisticRegression(feature_norm=np.sqrt(2), classes=[0, 1]))
    """

    def __init__(self, low=-1.0, high=1.0, clip=True):
        self.low = low
        self.high = high
        self.clip = clip

    def _ranges(self, n_features):
        """``(mid, half)`` arrays of length ``n_features``; a bad range raises."""
        arrays = []
        for name in ("low", "high"):
            value = getattr(self, name)
            try:
                array = np.asarray(value, dtype=np.float64)
            except (TypeError, ValueError):
                array = None
            if (array is None or array.ndim > 1 or isinstance(value, (bool, np.bool_))
                    or (array.ndim == 0 and not isinstance(value, (Real, np.ndarray)))):
                raise ValueError(
                    f"The {name!r} parameter of PublicRangeScaler must be a float or an "
                    f"array-like of floats of shape (n_features,). Got {value!r} instead.")
            if array.ndim == 1 and array.shape[0] != n_features:
                raise ValueError(
                    f"The {name!r} parameter of PublicRangeScaler has {array.shape[0]} "
                    f"values; X has {n_features} features.")
            arrays.append(np.broadcast_to(array, (n_features,)))
        low, high = arrays
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(low < high)):
            raise ValueError(
                "PublicRangeScaler needs finite ranges with low < high for every feature; "
                f"got low={self.low!r}, high={self.high!r}.")
        # (halves first: (low + high) / 2 overflows for ranges near 1e308)
        return low / 2.0 + high / 2.0, high / 2.0 - low / 2.0

    def _check_clip(self):
        if not isinstance(self.clip, (bool, np.bool_)):
            raise ValueError(f"The 'clip' parameter of PublicRangeScaler must be a bool. "
                             f"Got {self.clip!r} instead.")

    def fit(self, X, y=None):
        """Check the ranges against the width of X; nothing is kept of its values.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Only its number of features (and column names) is read.
        y : None
            Ignored.

        Returns
        -------
        self : object
            The scaler.
        """
        self._check_clip()
        X = validate_data(self, X, **_INPUT)
        self._ranges(X.shape[1])  # refused here, before any estimator downstream
        return self

    def transform(self, X):
        """Scale each row alone: ``(x - mid) / half``, clipped to [-1, 1] with ``clip=True``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Rows to scale.

        Returns
        -------
        X_scaled : {ndarray, sparse matrix} of shape (n_samples, n_features)
            The scaled rows (float64, or float32 for float32 X).
        """
        self._check_clip()
        options = dict(_INPUT, copy=True)
        if hasattr(self, "n_features_in_"):  # fitted: the same width and names
            X = validate_data(self, X, reset=False, **options)
        else:  # (requires_fit is False: transform needs the public ranges only)
            X = check_array(X, **options)
        mid, half = self._ranges(X.shape[1])
        if sp.issparse(X):
            if np.any(mid != 0.0):
                raise ValueError(
                    "PublicRangeScaler keeps sparse X sparse only for ranges symmetric "
                    "around 0 (low == -high): centring would fill every zero. Give "
                    "symmetric ranges, or a dense X.")
            X = X.multiply(1.0 / half).tocsr().astype(X.dtype)
            if self.clip:
                np.clip(X.data, -1.0, 1.0, out=X.data)
            return X
        X -= mid.astype(X.dtype)
        X /= half.astype(X.dtype)
        if self.clip:
            np.clip(X, -1.0, 1.0, out=X)
        return X

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # transform needs the public ranges only; a subclass may learn in its
        # fit (say, the data's minima and maxima) and keeps the default, so
        # that the searches and leaky_steps flag it.
        tags.requires_fit = type(self) is not PublicRangeScaler
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

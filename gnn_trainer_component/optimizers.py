"""Keras optimizers for use in user modules.

:class:`LazyAdam` is Keras' Adam for models with large embedding tables: where a
gradient is sparse (``tf.IndexedSlices``, as an ``Embedding`` lookup's is), it updates
the moments and the weights of the rows the batch looked up only. Keras' Adam decays
both moments of every row and rewrites every row of the table at every step, so a
step's cost grows with the table, not with the batch. The rule is TF Addons' ``LazyAdam`` and
PyTorch's ``SparseAdam``: a row's moments move only on the steps that look it up.
Dense gradients are updated as Keras' Adam does, bit for bit.
"""

from __future__ import annotations

import tensorflow as tf


@tf.keras.utils.register_keras_serializable(package="gnn_trainer_component")
class LazyAdam(tf.keras.optimizers.Adam):
  """Adam whose update of a sparse gradient touches only the rows it names.

  Takes Keras' ``Adam`` arguments (``learning_rate``, ``beta_1``, ``beta_2``,
  ``epsilon``, ``amsgrad``, ...) and keeps its slot variables, so checkpoints and
  backups hold the same variables as an ``Adam``'s.

  Example, in a module file::

    from gnn_trainer_component.optimizers import LazyAdam

    def optimizer_fn(hparams):
      return LazyAdam(learning_rate=hparams["learning_rate"])
  """

  def update_step(self, gradient, variable):
    """Keras' Adam step; on the rows of a sparse gradient only.

    Args:
      gradient: the variable's gradient, deduplicated by Keras (one row per index).
      variable: the variable to update.
    """
    if not isinstance(gradient, tf.IndexedSlices):
      super().update_step(gradient, variable)
      return
    dtype = variable.dtype
    local_step = tf.cast(self.iterations + 1, dtype)
    beta_1 = tf.cast(self.beta_1, dtype)
    beta_2 = tf.cast(self.beta_2, dtype)
    beta_1_power, beta_2_power = tf.pow(beta_1, local_step), tf.pow(beta_2, local_step)
    alpha = (tf.cast(self.learning_rate, dtype) * tf.sqrt(1 - beta_2_power)
             / (1 - beta_1_power))
    epsilon = self.epsilon
    if getattr(self, "adaptive_epsilon", False):
      epsilon = self.epsilon * tf.sqrt(1 - beta_2_power)

    index = self._index_dict[self._var_key(variable)]
    rows, values = gradient.indices, gradient.values
    m_rows = (beta_1 * tf.gather(self._momentums[index], rows)
              + (1 - beta_1) * values)
    v_rows = (beta_2 * tf.gather(self._velocities[index], rows)
              + (1 - beta_2) * tf.square(values))
    self._momentums[index].scatter_update(tf.IndexedSlices(m_rows, rows))
    self._velocities[index].scatter_update(tf.IndexedSlices(v_rows, rows))
    if self.amsgrad:
      v_hat = self._velocity_hats[index]
      v_rows = tf.maximum(tf.gather(v_hat, rows), v_rows)
      v_hat.scatter_update(tf.IndexedSlices(v_rows, rows))
    variable.scatter_sub(tf.IndexedSlices(m_rows * alpha / (tf.sqrt(v_rows) + epsilon), rows))

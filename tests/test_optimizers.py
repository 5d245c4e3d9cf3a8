"""LazyAdam: Keras' Adam on dense gradients, and on the looked-up rows only of sparse ones.

Fast, no pipeline: an embedding table and a dense kernel trained a few steps side by side
with Keras' Adam, in a ``tf.function`` as Keras' ``fit`` runs them.
"""

import numpy as np
import pytest
import tensorflow as tf

from gnn_trainer_component.optimizers import LazyAdam

#: The rows each step looks up (row 3 at every step; rows 1 and 5 at one step each).
STEPS = [[1, 3, 3], [3, 5], [3, 3, 5]]
ROWS = 8


def _train(optimizer, steps=STEPS):
  """An 8 x 2 embedding table and a 2 x 1 kernel, trained on ``steps``; their values and slots."""
  table = tf.Variable(np.arange(2 * ROWS, dtype=np.float32).reshape(ROWS, 2) / 10)
  kernel = tf.Variable([[0.5], [-0.25]])

  @tf.function
  def step(rows):
    with tf.GradientTape() as tape:
      looked_up = tf.gather(table, rows)
      loss = tf.reduce_sum(tf.square(looked_up @ kernel - 1.0))
    grads = tape.gradient(loss, [table, kernel])
    assert isinstance(grads[0], tf.IndexedSlices)
    optimizer.apply_gradients(zip(grads, [table, kernel]))

  for rows in steps:
    step(tf.constant(rows))
  slots = {name: [v.numpy() for v in optimizer.variables if name in v.name]
           for name in ("/m/", "/v/")}
  return table.numpy(), kernel.numpy(), slots


@pytest.mark.parametrize("amsgrad", [False, True])
def test_a_table_looked_up_whole_at_every_step_moves_as_with_adam(amsgrad):
  every_row = [list(range(ROWS))] * 3
  table, kernel, _ = _train(LazyAdam(learning_rate=0.1, amsgrad=amsgrad), every_row)
  adam_table, adam_kernel, _ = _train(
      tf.keras.optimizers.Adam(learning_rate=0.1, amsgrad=amsgrad), every_row)
  np.testing.assert_allclose(table, adam_table, atol=1e-5)
  np.testing.assert_allclose(kernel, adam_kernel, atol=1e-5)
  assert not np.allclose(table, np.arange(2 * ROWS).reshape(ROWS, 2) / 10)


def test_rows_looked_up_at_every_step_move_as_with_adam():
  table, _, _ = _train(LazyAdam(learning_rate=0.1))
  adam_table, _, _ = _train(tf.keras.optimizers.Adam(learning_rate=0.1))
  np.testing.assert_allclose(table[3], adam_table[3], atol=1e-5)


def test_dense_gradients_are_updated_as_adam_does_bit_for_bit():
  def train(optimizer):
    kernel = tf.Variable([[0.5], [-0.25]])
    for x in ([[1.0, 2.0]], [[-1.0, 0.5]], [[3.0, 1.0]]):
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(tf.constant(x) @ kernel - 1.0))
      optimizer.apply_gradients([(tape.gradient(loss, kernel), kernel)])
    return kernel.numpy()

  np.testing.assert_array_equal(train(LazyAdam(learning_rate=0.1)),
                                train(tf.keras.optimizers.Adam(learning_rate=0.1)))


def test_rows_never_looked_up_keep_their_values_and_zero_moments():
  table, _, slots = _train(LazyAdam(learning_rate=0.1))
  initial = np.arange(2 * ROWS, dtype=np.float32).reshape(ROWS, 2) / 10
  untouched = [0, 2, 4, 6, 7]
  np.testing.assert_array_equal(table[untouched], initial[untouched])
  for name in ("/m/", "/v/"):
    table_slot = next(s for s in slots[name] if s.shape == (ROWS, 2))
    np.testing.assert_array_equal(table_slot[untouched], 0.0)
    assert np.all(table_slot[[1, 3, 5]] != 0.0)


def test_a_row_stays_where_its_last_lookup_left_it():
  """Row 1 is looked up at the first step only: Adam's momentum moves it on, LazyAdam's not."""
  lazy_one, _, _ = _train(LazyAdam(learning_rate=0.1), STEPS[:1])
  lazy_all, _, _ = _train(LazyAdam(learning_rate=0.1))
  adam_one, _, _ = _train(tf.keras.optimizers.Adam(learning_rate=0.1), STEPS[:1])
  adam_all, _, _ = _train(tf.keras.optimizers.Adam(learning_rate=0.1))
  np.testing.assert_allclose(lazy_one[1], adam_one[1], atol=1e-5)
  np.testing.assert_array_equal(lazy_all[1], lazy_one[1])
  assert not np.allclose(adam_all[1], adam_one[1])


def test_round_trips_through_keras_serialization():
  optimizer = LazyAdam(learning_rate=0.01, beta_2=0.99)
  again = tf.keras.optimizers.deserialize(tf.keras.optimizers.serialize(optimizer))
  assert isinstance(again, LazyAdam)
  assert again.get_config()["beta_2"] == pytest.approx(0.99)

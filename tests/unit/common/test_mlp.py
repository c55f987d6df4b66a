"""The one MLP builder: layer order, sizes, activations, and initialization in build order."""

import torch
from torch import nn

from rllib_ext.common.mlp import mlp


def test_layers_sizes_and_activations():
    net = mlp(5, (7, 3), 2, nn.Tanh)
    assert [type(m) for m in net] == [nn.Linear, nn.Tanh, nn.Linear, nn.Tanh, nn.Linear]
    assert [(m.in_features, m.out_features) for m in net if isinstance(m, nn.Linear)] == [(5, 7), (7, 3), (3, 2)]
    assert net(torch.zeros(4, 5)).shape == (4, 2)


def test_no_hidden_layers_is_one_linear_layer():
    net = mlp(4, (), 3, nn.ReLU)
    assert len(net) == 1 and isinstance(net[0], nn.Linear)


def test_init_sees_each_linear_layer_as_it_is_made():
    seen = []
    mlp(3, (4, 5), 1, nn.ReLU, init=lambda layer, output: seen.append((layer.out_features, output)))
    assert seen == [(4, False), (5, False), (1, True)]


def test_same_seed_same_weights_as_layer_by_layer_code():
    def by_hand():
        torch.manual_seed(0)
        layers = []
        for a, b in ((3, 8), (8, 8)):
            lin = nn.Linear(a, b)
            nn.init.xavier_uniform_(lin.weight)
            layers += [lin, nn.Softsign()]
        layers.append(nn.Linear(8, 2))
        return nn.Sequential(*layers)

    def xavier_hidden(layer, output):
        if not output:
            nn.init.xavier_uniform_(layer.weight)

    torch.manual_seed(0)
    built = mlp(3, (8, 8), 2, nn.Softsign, init=xavier_hidden)
    expected = by_hand()
    for (k, v), (k2, v2) in zip(built.state_dict().items(), expected.state_dict().items(), strict=True):
        assert k == k2 and torch.equal(v, v2)

#!/usr/bin/python3
"""PyTorch reference for configs/vae_fashion.yaml: the same convolutional VAE (the state_dict
names of plugins/models/convae), the same loss (BCE with logits summed over each image plus
the KL term, averaged over the batch), Adam at 1e-3, batch 128, shuffled Fashion-MNIST in
[0, 1], and the test ELBO (nats per image, one sampled z per image) after each epoch.

  /usr/bin/python3 bench/vae_torch.py [--epochs N] [--seed S] [--threads T]
"""
import argparse
import gzip
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = "/usr/share/datasets/fashion-mnist"


def idx_images(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    n, h, w = (int.from_bytes(data[i:i + 4], "big") for i in (4, 8, 12))
    return torch.from_numpy(np.frombuffer(data, np.uint8, offset=16).reshape(n, 1, h, w).copy())


class VAE(nn.Module):
    def __init__(self, latent=16, ch=32):
        super().__init__()
        self.latent = latent
        self.encoder = nn.Module()
        self.encoder.net = nn.Sequential(
            nn.Conv2d(1, ch, 4, 2, 1), nn.ReLU(), nn.Conv2d(ch, 2 * ch, 4, 2, 1), nn.ReLU(),
            nn.Flatten(), nn.Linear(2 * ch * 49, 2 * latent), nn.Unflatten(1, (2 * latent, 1, 1)))
        self.decoder = nn.Module()
        self.decoder.net = nn.Sequential(
            nn.Flatten(), nn.Linear(latent, 2 * ch * 49), nn.ReLU(), nn.Unflatten(1, (2 * ch, 7, 7)),
            nn.ConvTranspose2d(2 * ch, ch, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(ch, 1, 4, 2, 1))

    def loss(self, x):
        h = self.encoder.net(x).flatten(1)
        mu, logvar = h[:, :self.latent], h[:, self.latent:]
        z = mu + torch.exp(0.5 * logvar) * torch.randn_like(mu)
        logits = self.decoder.net(z.view(-1, self.latent, 1, 1))
        n = x.shape[0]
        rec = F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / n
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / n
        return rec, kl


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    train = idx_images(f"{ROOT}/train-images-idx3-ubyte.gz").float() / 255
    test = idx_images(f"{ROOT}/t10k-images-idx3-ubyte.gz").float() / 255
    model = VAE()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(a.epochs):
        t0 = time.time()
        perm = torch.randperm(train.shape[0])
        model.train()
        for i in range(0, train.shape[0] - a.batch + 1, a.batch):
            rec, kl = model.loss(train[perm[i:i + a.batch]])
            opt.zero_grad()
            (rec + kl).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            tot = 0.0
            for i in range(0, test.shape[0], a.batch):
                x = test[i:i + a.batch]
                rec, kl = model.loss(x)
                tot += (rec + kl).item() * x.shape[0]
        print(f"epoch {epoch + 1}: test elbo {-tot / test.shape[0]:.3f} nats/image "
              f"({time.time() - t0:.1f} s)", flush=True)


if __name__ == "__main__":
    main()

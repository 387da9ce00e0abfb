#!/usr/bin/env python3
"""Writes houses.csv, the data of the CSV regression example (resources/examples/
house-prices-csv.mls). Made up, deterministic (seeded), with one categorical column, so
that the example shows one-hot encoding, standardisation and a regression target.

price_k = 1.8 area_m2 + 12 rooms - 0.6 age_years + district offset + noise(sd 10)
"""
import csv
import random

rng = random.Random(2026)
offset = {"centre": 120.0, "north": 40.0, "south": 10.0, "east": 25.0, "west": 55.0}
with open("houses.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["area_m2", "rooms", "age_years", "district", "price_k"])
    for _ in range(800):
        area = rng.uniform(30, 200)
        rooms = max(1, min(6, round(area / 35 + rng.gauss(0, 0.7))))
        age = rng.uniform(0, 80)
        district = rng.choice(sorted(offset))
        price = 1.8 * area + 12 * rooms - 0.6 * age + offset[district] + rng.gauss(0, 10)
        w.writerow([f"{area:.1f}", rooms, f"{age:.0f}", district, f"{price:.1f}"])

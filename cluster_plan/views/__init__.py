"""What a person reads about a plan: diff, graph, audit, capacity, and writing renderings."""

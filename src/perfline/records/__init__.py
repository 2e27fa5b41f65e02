"""The ground floor: plain records every package passes around. Imports nothing else of perfline."""

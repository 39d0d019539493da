from agent.surfaces.cli import main

main()
